// Command ec2_go runs metalfleet's AWS order flow with the official Go SDK (aws-sdk-go-v2), a client metalfleet
// did not write, against an EC2 endpoint (the test emulator): the emulator must take from it what EC2 takes and
// refuse what EC2 refuses, with EC2's codes.
//
// Input (a JSON file named on the command line, or stdin):
//
//	{"endpoint": "http://127.0.0.1:5055", "region": "us-east-1", "instance_types": ["p5.48xlarge", ...],
//	 "placement_group": "name", "tags": [{"Key": "k", "Value": "v"}],
//	 "key_tag": {"Key": "metalfleet:key", "Value": "<the node's idempotency key>"},
//	 "run": {...the RunInstances parameters the AWS driver sends, as boto3 takes them...}}
//
// "run" is decoded straight into ec2.RunInstancesInput (the SDK's member names are the API's), unknown members
// refused. User data is base64-encoded here: boto3 encodes it for the driver, the Go SDK leaves it to the caller
// ("User data must be base64-encoded", RunInstances).
//
// Output: one JSON object per step on stdout, {"step": ..., "ok": true|false, ...}; a refused call carries its
// "code", "message" and HTTP "status". The exit status is 0 when every step ran (a step may still report a
// refusal: the caller decides which ones are expected), 2 on bad input.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

type input struct {
	Endpoint       string          `json:"endpoint"`
	Region         string          `json:"region"`
	InstanceTypes  []string        `json:"instance_types"`
	PlacementGroup string          `json:"placement_group"`
	Tags           []types.Tag     `json:"tags"`
	KeyTag         types.Tag       `json:"key_tag"`
	Run            json.RawMessage `json:"run"`
}

type step map[string]any

var out = json.NewEncoder(os.Stdout)

func emit(s step) { _ = out.Encode(s) }

// failed fills a step with what EC2 answered an error: its code, message and HTTP status.
func failed(s step, err error) step {
	s["ok"] = false
	var api smithy.APIError
	if errors.As(err, &api) {
		s["code"], s["message"] = api.ErrorCode(), api.ErrorMessage()
	} else {
		s["error"] = err.Error()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s["status"] = re.HTTPStatusCode()
	}
	return s
}

func decodeRun(raw json.RawMessage) (*ec2.RunInstancesInput, error) {
	var in ec2.RunInstancesInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if in.UserData != nil {
		in.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(*in.UserData)))
	}
	return &in, nil
}

func instanceState(ctx context.Context, c *ec2.Client, id string) (*types.Instance, error) {
	got, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return nil, err
	}
	for _, r := range got.Reservations {
		for i := range r.Instances {
			return &r.Instances[i], nil
		}
	}
	return nil, fmt.Errorf("instance %s not described", id)
}

// waitFor polls DescribeInstances until the instance is in state want (or the deadline passes).
func waitFor(ctx context.Context, c *ec2.Client, id string, want types.InstanceStateName) (*types.Instance, int, error) {
	deadline := time.Now().Add(60 * time.Second)
	for polls := 1; ; polls++ {
		inst, err := instanceState(ctx, c, id)
		if err != nil {
			return nil, polls, err
		}
		if inst.State != nil && inst.State.Name == want {
			return inst, polls, nil
		}
		if time.Now().After(deadline) {
			return inst, polls, fmt.Errorf("instance %s not %s after 60s", id, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func interfaces(inst *types.Instance) []map[string]any {
	var nics []map[string]any
	for _, n := range inst.NetworkInterfaces {
		nic := map[string]any{"interface_type": aws.ToString(n.InterfaceType)}
		if n.Attachment != nil {
			nic["network_card_index"] = aws.ToInt32(n.Attachment.NetworkCardIndex)
			nic["device_index"] = aws.ToInt32(n.Attachment.DeviceIndex)
		}
		nics = append(nics, nic)
	}
	return nics
}

func main() {
	var raw []byte
	var err error
	if len(os.Args) > 1 {
		raw, err = os.ReadFile(os.Args[1])
	} else {
		raw, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ec2_go: reading input:", err)
		os.Exit(2)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fmt.Fprintln(os.Stderr, "ec2_go: input:", err)
		os.Exit(2)
	}
	run, err := decodeRun(in.Run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ec2_go:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	cfg := aws.Config{
		Region:      in.Region,
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "testing"),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(in.Endpoint) })

	// 1. the instance types' facts (GPUs, network cards, EFA)
	cards := map[string]int32{}
	described, err := client.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{
		InstanceTypes: toInstanceTypes(in.InstanceTypes)})
	if err != nil {
		emit(failed(step{"step": "describe_instance_types"}, err))
	} else {
		facts := map[string]any{}
		for _, t := range described.InstanceTypes {
			f := map[string]any{}
			if t.GpuInfo != nil && len(t.GpuInfo.Gpus) > 0 {
				g := t.GpuInfo.Gpus[0]
				f["gpu_count"], f["gpu_name"] = aws.ToInt32(g.Count), aws.ToString(g.Name)
				if g.MemoryInfo != nil {
					f["gpu_memory_mib"] = aws.ToInt32(g.MemoryInfo.SizeInMiB)
				}
			}
			if n := t.NetworkInfo; n != nil {
				f["network_cards"] = aws.ToInt32(n.MaximumNetworkCards)
				f["efa_supported"] = aws.ToBool(n.EfaSupported)
				if n.EfaInfo != nil {
					f["efa_max_interfaces"] = aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces)
				}
				cards[string(t.InstanceType)] = aws.ToInt32(n.MaximumNetworkCards)
			}
			facts[string(t.InstanceType)] = f
		}
		emit(step{"step": "describe_instance_types", "ok": true, "types": facts})
	}

	// 2. the cluster's placement group
	_, err = client.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{
		GroupName: aws.String(in.PlacementGroup), Strategy: types.PlacementStrategyCluster,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypePlacementGroup, Tags: in.Tags}}})
	if err != nil {
		emit(failed(step{"step": "create_placement_group"}, err))
	} else {
		emit(step{"step": "create_placement_group", "ok": true, "group": in.PlacementGroup})
	}

	// 3. RunInstances with the driver's parameters (its ClientToken, EFA interfaces on every card), into the group
	run.Placement = &types.Placement{GroupName: aws.String(in.PlacementGroup)}
	first, err := client.RunInstances(ctx, run)
	var instanceID string
	if err != nil {
		emit(failed(step{"step": "run_instances"}, err))
	} else {
		instanceID = aws.ToString(first.Instances[0].InstanceId)
		emit(step{"step": "run_instances", "ok": true, "reservation": aws.ToString(first.ReservationId),
			"instance": instanceID, "client_token": aws.ToString(first.Instances[0].ClientToken),
			"interfaces": len(run.NetworkInterfaces)})
	}

	// 4. the same request again: the same reservation, nothing bought
	again, err := client.RunInstances(ctx, run)
	if err != nil {
		emit(failed(step{"step": "run_instances_again"}, err))
	} else {
		bought, derr := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
			{Name: aws.String("tag:" + aws.ToString(in.KeyTag.Key)), Values: []string{aws.ToString(in.KeyTag.Value)}}}})
		s := step{"step": "run_instances_again", "ok": derr == nil, "reservation": aws.ToString(again.ReservationId),
			"instance": aws.ToString(again.Instances[0].InstanceId)}
		if derr == nil {
			n := 0
			for _, r := range bought.Reservations {
				n += len(r.Instances)
			}
			s["instances_with_key"] = n
		} else {
			s = failed(s, derr)
		}
		emit(s)
	}

	// 5. DescribeInstances until running
	if instanceID != "" {
		inst, polls, err := waitFor(ctx, client, instanceID, types.InstanceStateNameRunning)
		if err != nil {
			emit(failed(step{"step": "describe_until_running", "polls": polls}, err))
		} else {
			emit(step{"step": "describe_until_running", "ok": true, "state": string(inst.State.Name),
				"polls": polls, "interfaces": interfaces(inst),
				"placement_group": aws.ToString(inst.Placement.GroupName)})
		}
	}

	// 6. tags
	if instanceID != "" {
		_, err = client.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{instanceID}, Tags: in.Tags})
		if err != nil {
			emit(failed(step{"step": "create_tags"}, err))
		} else {
			inst, derr := instanceState(ctx, client, instanceID)
			s := step{"step": "create_tags", "ok": derr == nil}
			if derr == nil {
				tags := map[string]string{}
				for _, t := range inst.Tags {
					tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
				}
				s["tags"] = tags
			}
			emit(s)
		}
	}

	// 7. refused: the same ClientToken with other parameters
	mismatch, _ := decodeRun(in.Run)
	mismatch.Placement = run.Placement
	mismatch.NetworkInterfaces[0].Description = aws.String("another description")
	_, err = client.RunInstances(ctx, mismatch)
	emit(refused("refuse_token_mismatch", err))

	// 8. refused: a NetworkCardIndex past the type's network cards (as DescribeInstanceTypes gave them)
	badCard, _ := decodeRun(in.Run)
	badCard.ClientToken = aws.String(aws.ToString(run.ClientToken) + "-card")
	last := &badCard.NetworkInterfaces[len(badCard.NetworkInterfaces)-1]
	last.NetworkCardIndex = aws.Int32(cards[string(badCard.InstanceType)])
	_, err = client.RunInstances(ctx, badCard)
	s := refused("refuse_network_card_index", err)
	s["network_card_index"] = aws.ToInt32(last.NetworkCardIndex)
	emit(s)

	// 9. refused: a placement group that does not exist
	noGroup, _ := decodeRun(in.Run)
	noGroup.ClientToken = aws.String(aws.ToString(run.ClientToken) + "-pg")
	noGroup.Placement = &types.Placement{GroupName: aws.String(in.PlacementGroup + "-missing")}
	_, err = client.RunInstances(ctx, noGroup)
	emit(refused("refuse_unknown_placement_group", err))

	// 10. TerminateInstances until terminated
	if instanceID != "" {
		_, err = client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{instanceID}})
		if err != nil {
			emit(failed(step{"step": "terminate_until_terminated"}, err))
		} else {
			inst, polls, werr := waitFor(ctx, client, instanceID, types.InstanceStateNameTerminated)
			if werr != nil {
				emit(failed(step{"step": "terminate_until_terminated", "polls": polls}, werr))
			} else {
				emit(step{"step": "terminate_until_terminated", "ok": true, "state": string(inst.State.Name),
					"polls": polls})
			}
		}
	}

	// 11. the placement group, empty now
	_, err = client.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String(in.PlacementGroup)})
	if err != nil {
		emit(failed(step{"step": "delete_placement_group"}, err))
	} else {
		emit(step{"step": "delete_placement_group", "ok": true})
	}
}

// refused is the step of a request the reference says EC2 refuses: ok when it was refused (with its code).
func refused(name string, err error) step {
	if err == nil {
		return step{"step": name, "ok": false, "error": "accepted, where EC2 refuses it"}
	}
	s := failed(step{"step": name}, err)
	s["ok"] = s["code"] != nil
	return s
}

func toInstanceTypes(names []string) []types.InstanceType {
	out := make([]types.InstanceType, len(names))
	for i, n := range names {
		out[i] = types.InstanceType(n)
	}
	return out
}
